#!/bin/sh
# Install PostgreSQL (the stack's database: `python -m deployments stack up`) when missing and
# installable, as install-bubblewrap.sh does for the sandbox. Exits non-zero only when it is
# missing and could not be installed; the stack then says what to do.
if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "PostgreSQL is not installed and cannot be installed without root" >&2
    exit 1
  fi
fi
if command -v apt-get >/dev/null 2>&1; then
  echo "installing postgresql (the stack's database)..."
  # The package's own cluster (main) is not used by the stack; it keeps its data in --dir.
  ($SUDO apt-get install -y -qq postgresql >/dev/null 2>&1 ||
   ($SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq postgresql >/dev/null 2>&1)) ||
    { echo "could not install postgresql with apt-get" >&2; exit 1; }
  exit 0
fi
echo "no apt-get here; install PostgreSQL (initdb, postgres, pg_isready, psql) yourself" >&2
exit 1
