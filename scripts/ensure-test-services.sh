#!/usr/bin/env bash
# Makes sure what the test suite talks to is there: Debian's Chromium (for the page tests), D-Bus
# and GNOME Keyring (a Secret Service for the keychain tests) and a running local PostgreSQL (for
# the PostgreSQL backend). Installs or starts them when it can (root),
# and otherwise says exactly what is missing; the tests that need them then fail with that message.
set -u
say() { printf 'ensure-test-services: %s\n' "$*" >&2; }

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's chromium for the browser tests"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ||
      say "could not install chromium; browser tests will fail"
  else
    say "chromium is not installed (apt-get install chromium); browser tests will fail"
  fi
fi

# The keychain tests (test/client/stores/keychain.test.ts) start their own D-Bus session bus and
# gnome-keyring-daemon (a real Secret Service) and read items back with secret-tool.
if [ "$(uname -s)" = Linux ] && ! { command -v dbus-daemon && command -v gnome-keyring-daemon && command -v secret-tool; } >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's dbus, gnome-keyring and libsecret-tools for the keychain tests"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dbus gnome-keyring libsecret-tools >/dev/null) ||
      say "could not install dbus, gnome-keyring, libsecret-tools; keychain tests will fail"
  else
    say "dbus, gnome-keyring or libsecret-tools is missing (apt-get install dbus gnome-keyring libsecret-tools); keychain tests will fail"
  fi
fi

# The device-login test (test/cli/device-login.test.ts) runs the CLI on a terminal in tmux and
# reads the QR code it draws back with zbarimg.
if ! { command -v tmux && command -v zbarimg; } >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's tmux and zbar-tools for the device-login test"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux zbar-tools >/dev/null) ||
      say "could not install tmux, zbar-tools; the device-login terminal test will fail"
  else
    say "tmux or zbarimg is missing (apt-get install tmux zbar-tools); the device-login terminal test will fail"
  fi
fi

if command -v pg_isready >/dev/null 2>&1; then
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
      say "starting the local PostgreSQL"
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
      for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
    fi
  fi
  pg_isready -q -h 127.0.0.1 -p 5432 || say "PostgreSQL is not reachable on 127.0.0.1:5432; PostgreSQL tests will fail"
else
  say "PostgreSQL client tools not found; PostgreSQL tests need a server on 127.0.0.1:5432 (database test)"
fi
exit 0
