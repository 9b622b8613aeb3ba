# Sourced by scripts/test: import-linter in a virtualenv of its own, .venv-lint (first run, or
# when LINT_REQUIREMENT changes). Not in .venv: it brings `rich`, and structlog imports rich
# whenever it is installed (and renders console tracebacks with it), which would change what
# the server imports and how it logs in any .venv that also serves. The linter reads the
# source only; it never imports chalie, so it needs none of chalie's dependencies. Pinned: the
# tests read its report (tests/test_architecture.py), so a new release is taken on purpose.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lint_venv="$root/.venv-lint"
LINT_REQUIREMENT="import-linter==2.17"
stamp="$lint_venv/.chalie-installed"
if [ ! -f "$stamp" ] || ! grep -qxF "$LINT_REQUIREMENT" "$stamp" 2>/dev/null; then
    echo "chalie: installing $LINT_REQUIREMENT into $lint_venv..." >&2
    [ -x "$lint_venv/bin/python" ] || python3 -m venv "$lint_venv"
    if ! "$lint_venv/bin/python" -m pip install --disable-pip-version-check \
            "$LINT_REQUIREMENT" > "$lint_venv/install.log" 2>&1; then
        cat "$lint_venv/install.log" >&2
        echo "chalie: install failed (log above, also in $lint_venv/install.log)" >&2
        exit 1
    fi
    echo "$LINT_REQUIREMENT" > "$stamp"
fi
