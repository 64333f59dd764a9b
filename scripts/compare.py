"""PER-SAC vs uniform SAC over seeds on the pairs-trading env, with baselines and a report. See --help."""

import signal
import sys

if __name__ == "__main__":
    try:
        from comparison.cli import compare_main

        compare_main()
    except KeyboardInterrupt:
        # Ctrl-C before the runs start (torch is still being imported, say) or after they end: one line, as a
        # Ctrl-C during the runs gets (compare_main), and the shell's exit status of a command ended by SIGINT.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("compare.py: interrupted; rerun the same command to resume", file=sys.stderr)
        raise SystemExit(128 + signal.SIGINT) from None
