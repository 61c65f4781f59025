cron:
	systemctl enable --now cron
