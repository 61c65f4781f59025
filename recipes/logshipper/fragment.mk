# Checks the configuration, then restarts the journal (so it forwards to rsyslog) and rsyslog (so
# it starts sending).
logshipper:
	rsyslogd -N1
	systemctl restart systemd-journald
	systemctl is-enabled --quiet rsyslog || systemctl enable rsyslog
	systemctl restart rsyslog
