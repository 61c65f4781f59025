# Unpacks the site's archive (recipes.d/<fqdn>/data.tar.gz, in the payload as data.tar.gz) when
# it is new (its digest differs from the last one unpacked) and runs the site's Makefile then, so
# loading a database from it happens once per archive. Files in site_dir newer than the archive's
# copies are kept: on a new root disk those are the ones a backup restored (docs/BACKUPS.md). An
# archive unpacked before is given to a new `owner`, and a new `make_target` is run once on it.
data:
	@if [ ! -f data.tar.gz ]; then echo "data: the payload has no data.tar.gz, nothing to restore"; exit 0; fi; \
	set -e; \
	digest=$$(sha256sum data.tar.gz | cut -d' ' -f1); \
	run_target=false; \
	if [ "$$(cat {{ args.site_dir }}/.trog-data-sha256 2>/dev/null)" = "$$digest" ]; then \
	  echo "data: "{{ args.site_dir }}" already holds this archive"; \
	  [ "$$(stat -c %U {{ args.site_dir }})" = {{ args.owner }} ] || [ "$$(stat -c %u {{ args.site_dir }})" = {{ args.owner }} ] || chown -R {{ args.owner }}: {{ args.site_dir }}; \
	  if [ -f {{ args.site_dir }}/.trog-data-target ] && [ "$$(cat {{ args.site_dir }}/.trog-data-target)" != {{ args.make_target }} ]; then run_target=true; fi; \
	else \
	  mkdir -p {{ args.site_dir }}; \
	  tar -xzf data.tar.gz -C {{ args.site_dir }} --no-same-owner --keep-newer-files; \
	  chown -R {{ args.owner }}: {{ args.site_dir }}; \
	  run_target=true; \
	fi; \
	if $$run_target; then \
	  if [ -f {{ args.site_dir }}/Makefile ]; then $(MAKE) -C {{ args.site_dir }}{% if args.make_target %} {{ args.make_target }}{% endif %}; else echo "data: no Makefile in the archive's top level"; fi; \
	  echo "$$digest" > {{ args.site_dir }}/.trog-data-sha256; \
	fi; \
	printf '%s\n' {{ args.make_target }} > {{ args.site_dir }}/.trog-data-target
