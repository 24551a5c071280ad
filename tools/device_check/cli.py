"""tools/device-check's options: --prepare, --run [--only STAGE] [--source]."""
import os
import sys

from . import settings as S
from .prepare import prepare
from .run import STAGES, run


def main(argv, usage, top):
    """Returns the exit status: 0, 1 when a step failed, 2 on a usage error."""
    action, only, force_source = '', '', False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == '--prepare':
            action = 'prepare'
        elif a == '--run':
            action = 'run'
        elif a == '--only':
            action = 'run'
            only = argv[i + 1] if i + 1 < len(argv) else ''
            i += 1
            if only not in STAGES:
                print('--only: one of %s' % ' '.join(STAGES), file=sys.stderr)
                return 2
        elif a == '--source':
            force_source = True
        elif a in ('-h', '--help'):
            print(usage.strip('\n'))
            return 0
        else:
            print("tools/device-check: unknown argument '%s' (--help)" % a, file=sys.stderr)
            return 2
        i += 1
    if not action:
        print(usage.strip('\n'))
        return 2
    try:
        cfg = S.Settings(os.environ)
    except S.SettingError as e:
        print('tools/device-check: %s' % e, file=sys.stderr)
        return 2
    os.chdir(top)
    if action == 'prepare':
        return prepare(top, cfg)
    return run(top, cfg, only, force_source)
