# Checks the configuration, creates the cache's directories (squid -z does nothing to those that
# exist; it needs squid stopped), and starts squid with them.
fetchcache:
	squid -k parse
	systemctl stop squid
	squid --foreground -z
	systemctl is-enabled --quiet squid || systemctl enable squid
	systemctl start squid
