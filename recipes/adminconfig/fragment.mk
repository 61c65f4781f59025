{% set admin = args.user or (global.admin_user if global.admin_user is defined else 'root') -%}
# The admin user: created if the image did not make it, dotfiles copied in once, the listed keys
# authorized (and those dropped from the list taken back: authorized-keys.sh.j2).
adminconfig:
{%- if admin != "root" %}
	id -u {{ admin }} >/dev/null 2>&1 || useradd --create-home --shell {{ args.shell }} {{ admin }}
	usermod --shell {{ args.shell }} {{ admin }}
{%- endif %}
	home=$$(getent passwd {{ admin }} | cut -d: -f6); group=$$(id -gn {{ admin }}); \
	for dotfile in .bashrc .inputrc .vimrc .gitconfig; do \
	  [ -e "$$home/$$dotfile" ] || install -m 0644 -o {{ admin }} -g "$$group" /etc/trog/adminconfig/skel/$$dotfile "$$home/$$dotfile"; \
	done
	/usr/local/lib/trog/authorized-keys
