# Rules are added, never reset: a rule dropped from the list stays until removed by hand with
# `ufw delete`, which beats a window with no firewall on every run.
ufw:
	ufw default deny incoming
	ufw default allow outgoing
{%- if args.ssh %}
	ufw allow 22/tcp
{%- endif %}
{%- for rule in args.allow %}
	ufw allow {{ rule }}
{%- endfor %}
	ufw logging {{ args.logging }}
	ufw --force enable
