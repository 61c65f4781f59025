# Rules are never reset, which would leave a window with no firewall on every run: the rules
# listed are added when ufw lacks them, and those an earlier run added and the list has dropped
# are deleted (/usr/local/lib/trog/ufw-allow, from allow.sh.j2), all in one ufw process
# (ufw-batch, from batch.py.j2).
# A default or the logging level already in ufw's files is not set again: each `ufw` is a Python
# start (half a second under emulation) and, on an active firewall, a reload of every rule
# (seconds). The files are what `ufw enable` loads, so skipping a setting they hold changes
# nothing. Likewise a rule ufw already lists is not added again, and a firewall that is enabled in
# ufw.conf and whose rules are loaded in the kernel (its user chain exists) is not enabled again:
# on an active firewall, `ufw default`, `ufw logging`, `ufw allow` and `ufw delete` apply
# themselves at once. Enabling it loads the rules files as a boot does (ufw-enable, from
# enable.sh.j2), not one `iptables` at a time as `ufw enable` does.
ufw:
	grep -qx 'DEFAULT_INPUT_POLICY="DROP"' /etc/default/ufw || ufw default deny incoming
	grep -qx 'DEFAULT_OUTPUT_POLICY="ACCEPT"' /etc/default/ufw || ufw default allow outgoing
	/usr/local/lib/trog/ufw-allow
	grep -qx 'LOGLEVEL='{{ args.logging }} /etc/ufw/ufw.conf || ufw logging {{ args.logging }}
	grep -qx 'ENABLED=yes' /etc/ufw/ufw.conf && iptables -n -L ufw-user-input >/dev/null 2>&1 || /usr/local/lib/trog/ufw-enable
