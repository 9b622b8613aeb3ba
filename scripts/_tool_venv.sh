# Sourced by _lint_venv.sh and _docs_venv.sh: `tool_venv DIR REQUIREMENTS` makes the virtualenv
# DIR with the pinned REQUIREMENTS (words for pip), on the first run or when they change (the
# stamp DIR/.chalie-installed holds what was installed). A failed install prints pip's log.
tool_venv() {
    local venv="$1" requirements="$2"
    local stamp="$venv/.chalie-installed"
    if [ -f "$stamp" ] && grep -qxF "$requirements" "$stamp" 2>/dev/null; then
        return 0
    fi
    echo "chalie: installing $requirements into $venv..." >&2
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    # shellcheck disable=SC2086  # one requirement a word
    if ! "$venv/bin/python" -m pip install --disable-pip-version-check \
            $requirements > "$venv/install.log" 2>&1; then
        cat "$venv/install.log" >&2
        echo "chalie: install failed (log above, also in $venv/install.log)" >&2
        exit 1
    fi
    echo "$requirements" > "$stamp"
}
