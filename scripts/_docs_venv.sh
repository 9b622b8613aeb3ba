# Sourced by scripts/test and scripts/docs: MkDocs with the Material theme in a virtualenv of its
# own, .venv-docs (first run, or when DOCS_REQUIREMENTS changes). Not in .venv: the site's
# tools (Markdown, its extensions, Pygments, Jinja2...) have nothing to do with what the server
# imports. Pinned: the build runs with --strict, so a new release (a new warning) is taken on
# purpose, never by a fresh install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/_tool_venv.sh"
DOCS_REQUIREMENTS="mkdocs==1.6.1 mkdocs-material==9.8.2"
tool_venv "$root/.venv-docs" "$DOCS_REQUIREMENTS"
