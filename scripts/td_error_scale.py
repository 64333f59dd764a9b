"""Scale of SAC's TD errors on the pairs env beside LAP's priority floor: see comparison/td_error_scale.py."""

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.td_error_scale import td_error_scale_main

if __name__ == "__main__":
    td_error_scale_main()
