"""Make `import domain` and `import projections` name the packages, not the test folders of the same names.

tests/ has no __init__.py, so pytest puts tests/ itself on sys.path for tests/conftest.py; without the
project root ahead of it, `import domain` would find tests/domain as an empty namespace package.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if sys.path[:1] != [ROOT]:
    sys.path.insert(0, ROOT)
