#!/bin/sh
# Install bubblewrap (the sandbox's OS-level jail) when missing and installable. Never fails:
# without it the sandbox falls back to process limits and records the weaker isolation.
if command -v bwrap >/dev/null 2>&1; then exit 0; fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "warning: bubblewrap is not installed and cannot be installed without root;" \
         "the sandbox will run with weaker, process-level isolation" >&2
    exit 0
  fi
fi
if command -v apt-get >/dev/null 2>&1; then
  echo "installing bubblewrap (sandbox isolation)..."
  ($SUDO apt-get install -y -qq bubblewrap >/dev/null 2>&1 ||
   ($SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq bubblewrap >/dev/null 2>&1)) ||
    echo "warning: could not install bubblewrap; the sandbox will use process-level isolation" >&2
else
  echo "warning: no apt-get here; install bubblewrap yourself for full sandbox isolation" >&2
fi
exit 0
