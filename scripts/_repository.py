"""
Imported first by the scripts that use the experiment's packages: puts the repository root at the front of
``sys.path``, so that ``comparison`` and ``envs`` import from the clone whatever installed the library
(``bash scripts/setup_env.sh``, or ``pip install -e ".[experiments]"``, which installs only ``sb3_per`` and
``sb3_per_envs``).
"""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
