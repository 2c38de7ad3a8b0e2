#!/usr/bin/env bash
# Installs PyFlink (apache-flink, pinned) into its own virtualenv, so its
# pinned dependencies (numpy, pandas, pyarrow, apache-beam, ...) do not touch
# the system Python. keyed_windows.py re-executes itself under this venv's
# python when `import pyflink` fails in the python that started it.
# Needs: python3 (3.9-3.12) with venv, a JDK 11/17/21 (java + javac + jar).
# Env: KEEL_FLINK_VENV (default ~/.keel-flink-venv).
set -euo pipefail
VENV="${KEEL_FLINK_VENV:-$HOME/.keel-flink-venv}"
VERSION=2.3.0
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import pyflink.version as v, sys; sys.exit(v.__version__ != '$VERSION')" 2>/dev/null; then
  echo "install.sh: apache-flink $VERSION already in $VENV"
  exit 0
fi
for tool in java javac jar; do
  command -v "$tool" >/dev/null || { echo "install.sh: $tool not found (install a JDK, e.g. apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
done
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "apache-flink==$VERSION"
"$VENV/bin/python" -c "import pyflink.version as v; print('install.sh: apache-flink', v.__version__, 'in $VENV')"
