# Sourced by scripts/test and scripts/docs: MkDocs with the Material theme in a virtualenv of its
# own, .venv-docs (first run, or when DOCS_REQUIREMENTS changes). Not in .venv: the site's
# tools (Markdown, its extensions, Pygments, Jinja2...) have nothing to do with what the server
# imports. Pinned: the build runs with --strict, so a new release (a new warning) is taken on
# purpose, never by a fresh install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
docs_venv="$root/.venv-docs"
DOCS_REQUIREMENTS="mkdocs==1.6.1 mkdocs-material==9.8.2"
docs_stamp="$docs_venv/.chalie-installed"
if [ ! -f "$docs_stamp" ] || ! grep -qxF "$DOCS_REQUIREMENTS" "$docs_stamp" 2>/dev/null; then
    echo "chalie: installing $DOCS_REQUIREMENTS into $docs_venv..." >&2
    [ -x "$docs_venv/bin/python" ] || python3 -m venv "$docs_venv"
    # shellcheck disable=SC2086  # one requirement a word
    if ! "$docs_venv/bin/python" -m pip install --disable-pip-version-check \
            $DOCS_REQUIREMENTS > "$docs_venv/install.log" 2>&1; then
        cat "$docs_venv/install.log" >&2
        echo "chalie: install failed (log above, also in $docs_venv/install.log)" >&2
        exit 1
    fi
    echo "$DOCS_REQUIREMENTS" > "$docs_stamp"
fi
