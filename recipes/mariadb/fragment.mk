# The server with trog's settings, then users and databases from a file (never a command line,
# which every process on the guest could read).
mariadb:
	install -d -m 0700 /var/lib/mysql-dumps
	systemctl is-enabled --quiet mariadb || systemctl enable mariadb
	systemctl restart mariadb
	mysql --user=root < /etc/trog/mariadb/setup.sql
	rm -f /etc/trog/mariadb/setup.sql
