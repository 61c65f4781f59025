# Restarts the proxy so the port and upstream written to its configuration take effect.
aptmirror:
	systemctl enable apt-cacher-ng
	systemctl restart apt-cacher-ng
