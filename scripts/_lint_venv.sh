# Sourced by scripts/test: import-linter in a virtualenv of its own, .venv-lint (first run, or
# when LINT_REQUIREMENT changes). Not in .venv: it brings `rich`, and structlog imports rich
# whenever it is installed (and renders console tracebacks with it), which would change what
# the server imports and how it logs in any .venv that also serves. The linter reads the
# source only; it never imports chalie, so it needs none of chalie's dependencies. Pinned: the
# tests read its report (tests/test_architecture.py), so a new release is taken on purpose.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/_tool_venv.sh"
LINT_REQUIREMENT="import-linter==2.17"
tool_venv "$root/.venv-lint" "$LINT_REQUIREMENT"
