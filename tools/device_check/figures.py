"""The key figures of the table, read from what the stages wrote."""
import json


def human(n):
    for unit, s in (('G', 30), ('M', 20), ('K', 10)):
        if n >= 1 << s and n % (1 << s) == 0:
            return '%d%s' % (n >> s, unit)
    return str(n)


def _lines(path):
    with open(path, errors='replace') as f:
        return f.read().splitlines()


def bench_figure(json_path, log_path):
    """hora-bench-allreduce's best in-place busbw from its --json rows; else
    (the run was cut short) its last table row on stdout; else why not."""
    rows = []
    try:
        with open(json_path) as f:
            rows = json.load(f)
    except (OSError, ValueError):
        pass
    try:
        if rows:
            best = max(rows, key=lambda r: r.get('busbw') or 0)
            wrong = sum(r.get('wrong') or 0 for r in rows)
            return ('busbw max %.1f GB/s at %s (in place), %d rows, #wrong %d'
                    % (best['busbw'], human(best['bytes']), len(rows), wrong))
        last = None
        for line in _lines(log_path):
            f = line.split()
            if len(f) >= 11 and f[0].isdigit() and f[1].isdigit():
                last = f
        if last:
            return 'no JSON; last row: %s bytes, busbw %s GB/s (in place)' % (last[0], last[10])
        why = [line.strip() for line in _lines(log_path) if 'hora-bench-allreduce:' in line or 'error' in line]
        return 'no rows' + (': ' + why[0][:160] if why else '')
    except (OSError, KeyError, TypeError, ValueError):
        return ''


def train_figure(jsonl, warmup_steps, global_batch):
    """img/s over the steps after warmup_steps from hora-train's JSON log (each
    "train" row covers the steps since the one before it); '' without any."""
    images = seconds = 0.0
    last = 0
    try:
        with open(jsonl) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        rows = []
    try:
        for r in rows:
            if r.get('type') != 'train':
                continue
            step = r['step']
            if step > warmup_steps and r.get('img_per_s'):
                n = (step - max(last, warmup_steps)) * global_batch
                images += n
                seconds += n / r['img_per_s']
            last = step
    except (AttributeError, KeyError, TypeError):
        return ''
    return '%.0f' % (images / seconds) if seconds > 0 else ''


def profile_note(path):
    """One line from hora-train --profile's table: the units' share, the
    rest, the three largest units."""
    units, total, rest, head = [], None, None, ''
    try:
        for line in _lines(path):
            f = line.split()
            if line.startswith('profile:'):
                head = line.split('(')[0].strip()
            elif line.strip().startswith('all units') and len(f) >= 4:
                total = '%s ms (%s)' % (f[2], f[3])
            elif line.strip().startswith('rest of the step') and len(f) >= 6:
                rest = '%s ms (%s)' % (f[4], f[5])
            elif len(f) == 5 and f[4].endswith('%') and f[0] != 'conv+bn':
                units.append((float(f[3]), f[0]))
    except (OSError, ValueError):
        return ''
    if not units:
        return 'no profile table'
    top = ', '.join('%s %.2f ms' % (n, ms) for ms, n in sorted(units, reverse=True)[:3])
    return '%s: conv+bn units %s, rest of the step %s; largest: %s' % (head, total, rest, top)
