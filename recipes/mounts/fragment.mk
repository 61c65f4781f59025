# The entries as the guest's mounts (converge-mounts, from the vm recipe): a changed entry is
# mounted again, a dropped one unmounted and taken out of /etc/fstab.
# Guests finished before kept the entries between two marker lines of /etc/fstab: those lines
# become the entries' last run, and the markers go.
mounts:
	if grep -qx '# BEGIN trog mounts' /etc/fstab && [ ! -e /var/lib/trog/mounts/mounts ]; then \
	  mkdir -p /var/lib/trog/mounts; \
	  sed -n '/^# BEGIN trog mounts$$/,/^# END trog mounts$$/{/^#/!p;}' /etc/fstab > /var/lib/trog/mounts/mounts; \
	  sed -i '/^# BEGIN trog mounts$$/d; /^# END trog mounts$$/d' /etc/fstab; \
	fi
	/usr/local/lib/trog/converge-mounts mounts < /etc/trog/mounts/fstab
