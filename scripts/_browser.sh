# Sourced by scripts/test: the browser tests drive Debian's chromium through chromium-driver.
# Installs both when they are missing and this can (root with apt-get); otherwise the browser
# tests skip themselves with one line saying how to install them.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "chalie: installing chromium and chromium-driver for the browser tests..." >&2
        export DEBIAN_FRONTEND=noninteractive
        if ! apt-get install -y -q chromium chromium-driver > /tmp/chalie-apt.log 2>&1; then
            # A fresh machine may have no package lists yet.
            apt-get update -q >> /tmp/chalie-apt.log 2>&1 || true
            apt-get install -y -q chromium chromium-driver >> /tmp/chalie-apt.log 2>&1 \
                || echo "chalie: could not install chromium (log: /tmp/chalie-apt.log);" \
                        "the browser tests will be skipped" >&2
        fi
    fi
fi
