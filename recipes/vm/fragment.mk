# The guest side of the machine: the guest agent libvirt talks to, and the data volume.
# The agent's unit is started by udev when its channel appears, and cannot be enabled: starting
# it here only makes sure it runs.
vm:
	systemctl start qemu-guest-agent
{%- if args.data_volume_size %}
	set -e; \
	disk=$$(ls /dev/disk/by-id/*trog-data 2>/dev/null | head -n 1); \
	if [ -z "$$disk" ]; then echo "vm: no disk with serial trog-data is attached" >&2; exit 1; fi; \
	if ! blkid "$$disk" >/dev/null 2>&1; then mkfs.ext4 -q -L trog-data "$$disk"; fi; \
	echo 'LABEL=trog-data '{{ args.data_mount }}' ext4 defaults,nofail 0 2' | /usr/local/lib/trog/converge-mounts vm-data
{%- endif %}
{#- The extra disks: found by their serial, formatted ext4 only when blank, mounted by UUID with
    nofail so a guest whose disk went missing still boots. A disk no longer listed is unmounted
    and its line taken out of fstab (converge-mounts). #}
{%- if args.disks %}
	set -e; \
	lines=$$(mktemp); \
	udevadm settle 2>/dev/null || true; \
{%- for disk in args.disks %}
	disk=$$(ls /dev/disk/by-id/*trog-disk-{{ disk.name }} 2>/dev/null | head -n 1); \
	if [ -z "$$disk" ]; then echo "vm: no disk with serial trog-disk-"{{ disk.name }}" is attached" >&2; rm -f "$$lines"; exit 1; fi; \
	if ! blkid "$$disk" >/dev/null 2>&1; then mkfs.ext4 -q "$$disk"; fi; \
	echo "UUID=$$(blkid -s UUID -o value "$$disk") "{{ disk.mount }}" ext4 defaults,nofail 0 2" >> "$$lines"; \
{%- endfor %}
	status=0; /usr/local/lib/trog/converge-mounts vm-disks < "$$lines" || status=$$?; \
	rm -f "$$lines"; exit $$status
{%- else %}
	/usr/local/lib/trog/converge-mounts vm-disks </dev/null
{%- endif %}
{#- The folders shared from the hypervisor, each mounted by its virtiofs tag (kept in fstab by
    tag). A guest without any gets the same Makefile as before they existed. #}
{%- for folder in args.shared_folders %}
	set -e; \
	mkdir -p {{ folder.mount }}; \
	sed -i '/^{{ folder.name }} /d' /etc/fstab; \
	echo '{{ folder.name }} '{{ folder.mount }}' virtiofs {% if folder.readonly %}ro,{% endif %}defaults,nofail 0 0' >> /etc/fstab; \
	mountpoint -q {{ folder.mount }} || mount {{ folder.mount }} || \
	  echo 'vm: shared folder {{ folder.name }} is not attached yet (provision --restart-later): it is mounted when the guest next starts' >&2
{%- endfor %}
