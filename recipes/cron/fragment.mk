cron:
	systemctl is-enabled --quiet cron || systemctl enable cron
	systemctl start cron
