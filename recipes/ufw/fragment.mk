# Rules are added, never reset: a rule dropped from the list stays until removed by hand with
# `ufw delete`, which beats a window with no firewall on every run.
# A default or the logging level already in ufw's files is not set again: each `ufw` is a Python
# start (half a second under emulation) and, on an active firewall, a reload of every rule
# (seconds). The files are what the last line loads, so skipping a setting they hold changes
# nothing.
ufw:
	grep -qx 'DEFAULT_INPUT_POLICY="DROP"' /etc/default/ufw || ufw default deny incoming
	grep -qx 'DEFAULT_OUTPUT_POLICY="ACCEPT"' /etc/default/ufw || ufw default allow outgoing
{%- if args.ssh %}
	ufw allow 22/tcp
{%- endif %}
{%- for rule in args.allow %}
	ufw allow {{ rule }}
{%- endfor %}
	grep -qx 'LOGLEVEL='{{ args.logging }} /etc/ufw/ufw.conf || ufw logging {{ args.logging }}
	ufw --force enable
