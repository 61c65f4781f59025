# Enables the domain's site in place of the package's default one, checks it, and reloads.
nginx:
{%- if not args.upstream %}
	mkdir -p {{ args.root or "/var/www/" ~ domain }}
{%- endif %}
	ln -sfn ../sites-available/{{ domain }}.conf /etc/nginx/sites-enabled/{{ domain }}.conf
	rm -f /etc/nginx/sites-enabled/default
	nginx -t -q
	systemctl is-enabled --quiet nginx || systemctl enable nginx
	systemctl reload-or-restart nginx
