# tools/horovod_shim/rank_runner.py - run on every rank by tools/horovod-test-torch:
# loads Horovod's test_torch.py (or another of its test files) from the path
# given, runs its TorchTests (or the --class named) with unittest (the whole
# class, minus --exclude, or only --only), and writes this
# rank's outcome per test to RESULTS/rank.<R>.json for the tool to merge:
# {"ran": N, "passed": [...], "failed": [...], "asserted": [...], "skipped": {...},
#  "complete": true}, where failed holds failures, errors and unexpected
# successes, asserted the failures alone (an assertion of the test, not an
# exception), and skipped the skips with their reasons. The file is rewritten
# after every test ("complete": false until the last), so a job its timeout
# ended still says which tests finished. Exit 0 when this rank had no failure.
#
#   python3 rank_runner.py --test DIR/test_torch.py --utils DIR/utils
#           --results DIR [--only A,B] [--exclude A,B] [--class TorchAdasumTests]
import argparse
import importlib.util
import json
import os
import sys
import unittest


def world_rank():
    for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if name in os.environ:
            return int(os.environ[name])
    return 0


def names_of(text):
    return [n for n in (text or "").split(",") if n]


def outcome(result, complete):
    """The outcome so far of result (a Recorder)."""
    asserted = sorted({t._testMethodName for t, _ in result.failures})
    failed = sorted(set(asserted) | {t._testMethodName for t, _ in result.errors}
                    | {t._testMethodName for t in result.unexpectedSuccesses})
    skipped = {t._testMethodName: reason for t, reason in result.skipped}
    passed = [n for n in result.finished if n not in failed and n not in skipped]
    return {"ran": len(result.finished), "passed": passed, "failed": failed, "asserted": asserted,
            "skipped": skipped, "complete": complete}


def write(path, data):
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1)
    os.replace(path + ".tmp", path)


class Recorder(unittest.TextTestResult):
    """unittest's text result that writes the outcome after each test."""
    path = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.finished = []

    def stopTest(self, test):
        super().stopTest(test)
        self.finished.append(test._testMethodName)
        write(self.path, outcome(self, False))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--test", required=True)
    parser.add_argument("--utils", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--exclude", default="")
    parser.add_argument("--class", dest="test_class", default="TorchTests")
    args = parser.parse_args()

    # common.py is imported as a top-level module (test_torch.py adds ../utils
    # itself; that is not where it lies when test_torch.py was copied alone).
    sys.path.insert(0, args.utils)
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.test)))
    spec = importlib.util.spec_from_file_location("test_torch", args.test)
    module = importlib.util.module_from_spec(spec)
    sys.modules["test_torch"] = module
    spec.loader.exec_module(module)

    cls = getattr(module, args.test_class)
    only, exclude = names_of(args.only), names_of(args.exclude)
    names = [n for n in unittest.TestLoader().getTestCaseNames(cls)
             if n not in exclude and (not only or n in only)]
    unknown = [n for n in only + exclude if not hasattr(cls, n)]
    if unknown:
        print("rank_runner: no such test in %s: %s" % (args.test_class, ", ".join(unknown)), file=sys.stderr)
        return 2
    suite = unittest.TestSuite(cls(n) for n in names)
    Recorder.path = os.path.join(args.results, "rank.%d.json" % world_rank())
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout, resultclass=Recorder).run(suite)
    done = outcome(result, True)
    write(Recorder.path, done)
    return 0 if not done["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
