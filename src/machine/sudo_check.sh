#!/bin/sh
# Whether sudo runs trog's programs as root for this login: exits 0 as root, and does nothing
# else. Installed as /usr/libexec/trog/sudo-check; trog runs it through sudo to settle sudo
# (passwordless, or with the password handed in) before any other work on the hypervisor.
[ $# -eq 0 ] && [ "$(id -u)" -eq 0 ]
