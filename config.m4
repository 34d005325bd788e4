dnl The build recipe lives in ext/config.m4 (PIE builds there). A PECL package is
dnl built from its root, which is this folder: include it from here.
dnl In a git checkout, build in ext/ instead: configure writes a Makefile in the
dnl folder it runs in, and this folder has its own.
sinclude(ext/config.m4)
