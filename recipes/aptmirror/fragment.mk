# Restarts the proxy so the port and upstream written to its configuration take effect. Its
# resolver (libevent's) refuses every download ("503 Bad DNS configuration") when
# /etc/resolv.conf is missing, even when an upstream proxy does the resolving; an empty file means
# the same as none to the C library, so a guest without one gets an empty one.
aptmirror:
	[ -e /etc/resolv.conf ] || [ -L /etc/resolv.conf ] || touch /etc/resolv.conf
	systemctl is-enabled --quiet apt-cacher-ng || systemctl enable apt-cacher-ng
	systemctl restart apt-cacher-ng
