# Unpacks the site's archive when it is new (its digest differs from the last one unpacked) and
# runs the site's Makefile then, so loading a database from it happens once per archive. Files in
# site_dir newer than the archive's copies are kept: on a new root disk those are the ones a
# backup restored (docs/BACKUPS.md).
data:
	@if [ ! -f {{ args.archive }} ]; then echo "data: the payload has no "{{ args.archive }}", nothing to restore"; exit 0; fi; \
	set -e; \
	digest=$$(sha256sum {{ args.archive }} | cut -d' ' -f1); \
	if [ "$$(cat {{ args.site_dir }}/.trog-data-sha256 2>/dev/null)" = "$$digest" ]; then echo "data: "{{ args.site_dir }}" already holds this archive"; exit 0; fi; \
	mkdir -p {{ args.site_dir }}; \
	tar -xzf {{ args.archive }} -C {{ args.site_dir }} --no-same-owner --keep-newer-files; \
	chown -R {{ args.owner }}: {{ args.site_dir }}; \
	if [ -f {{ args.site_dir }}/Makefile ]; then $(MAKE) -C {{ args.site_dir }}{% if args.make_target %} {{ args.make_target }}{% endif %}; else echo "data: no Makefile in the archive's top level"; fi; \
	echo "$$digest" > {{ args.site_dir }}/.trog-data-sha256
