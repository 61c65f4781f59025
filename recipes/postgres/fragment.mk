# trog's settings into the cluster (its directory carries the major version, so it is found
# rather than named), then roles and databases from a file, never from a command line (run from /:
# postgres cannot read the directory make runs in).
postgres:
	install -d -m 0700 -o postgres -g postgres /var/lib/postgresql-dumps
	set -e; for conf in /etc/postgresql/*/main/conf.d; do install -m 0644 /etc/trog/postgres/trog.conf "$$conf/60-trog.conf"; done
	systemctl is-enabled --quiet postgresql || systemctl enable postgresql
	systemctl restart postgresql
	cd / && su postgres -c 'psql -v ON_ERROR_STOP=1 -q -f /etc/trog/postgres/setup.sql'
	rm -f /etc/trog/postgres/setup.sql
