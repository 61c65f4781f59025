{% set admin = args.user or (global.admin_user if global.admin_user is defined else 'root') -%}
# The admin user: created if the image did not make it, dotfiles copied in once, extra keys added.
adminconfig:
{%- if admin != "root" %}
	id -u {{ admin }} >/dev/null 2>&1 || useradd --create-home --shell {{ args.shell }} {{ admin }}
	usermod --shell {{ args.shell }} {{ admin }}
{%- endif %}
	home=$$(getent passwd {{ admin }} | cut -d: -f6); group=$$(id -gn {{ admin }}); \
	for dotfile in .bashrc .inputrc .vimrc .gitconfig; do \
	  [ -e "$$home/$$dotfile" ] || install -m 0644 -o {{ admin }} -g "$$group" /etc/trog/adminconfig/skel/$$dotfile "$$home/$$dotfile"; \
	done
{%- if args.authorized_keys %}
	home=$$(getent passwd {{ admin }} | cut -d: -f6); group=$$(id -gn {{ admin }}); \
	install -d -m 0700 -o {{ admin }} -g "$$group" "$$home/.ssh"; \
	touch "$$home/.ssh/authorized_keys"; chown {{ admin }}:"$$group" "$$home/.ssh/authorized_keys"; chmod 0600 "$$home/.ssh/authorized_keys"
{%- for key in args.authorized_keys %}
	grep -qxF -e {{ key }} "$$(getent passwd {{ admin }} | cut -d: -f6)/.ssh/authorized_keys" || printf '%s\n' {{ key }} >> "$$(getent passwd {{ admin }} | cut -d: -f6)/.ssh/authorized_keys"
{%- endfor %}
{%- endif %}
