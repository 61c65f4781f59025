# Replaces trog's block in /etc/fstab with the current entries, then mounts them.
mounts:
{%- for entry in args.entries %}
	mkdir -p {{ (entry | split)[1] }}
{%- endfor %}
	sed -i '/^# BEGIN trog mounts$$/,/^# END trog mounts$$/d' /etc/fstab
	cat /etc/trog/mounts/fstab >> /etc/fstab
	systemctl daemon-reload
	mount -a
