# Checks the configuration, then restarts rsyslog so it listens.
logcollector:
	mkdir -p /var/log/remote
	rsyslogd -N1
	systemctl is-enabled --quiet rsyslog || systemctl enable rsyslog
	systemctl restart rsyslog
