# Debian packages built from the tree with CPack (README "Debian packages", admin guide):
#
#   cmake --preset deb && cmake --build --preset deb && (cd build/deb && cpack -G DEB)
#
#   ctr       ctr, ctr-bench and its workloads, /etc/ctr (conffiles), man pages, docs
#   ctr-suid  ctr-mount-helper, setuid root (kernel squashfs; ctr.conf's 'allow setuid')
#   ctr-slurm the Slurm SPANK plugin and an example plugstack.conf line (where libslurm-dev
#             was there to build it)
#
# ctr's programs live in /usr/lib/ctr/bin: Debian's containerd owns /usr/bin/ctr and
# bash-completion/completions/ctr. The package offers both names through
# update-alternatives, which takes them only where no other package's file is (maintainer
# scripts in this directory); /usr/bin/ctr-bench is ctr's alone.
set(CTR_DEB_MAINTAINER "ctr developers <ctr-maintainers@example.org>" CACHE STRING
    "Maintainer field of the Debian packages")

set(CPACK_PROJECT_CONFIG_FILE "${CMAKE_CURRENT_LIST_DIR}/cpack-project.cmake")
set(CPACK_PACKAGE_CONTACT "${CTR_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CTR_DEB_MAINTAINER}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_CTR_PACKAGE_NAME ctr)
set(CPACK_DEBIAN_CTR_PACKAGE_DEPENDS "squashfuse, fuse3, squashfs-tools, e2fsprogs, fuse2fs, fuse-overlayfs")
set(CPACK_DEBIAN_CTR_PACKAGE_RECOMMENDS "libjs-vega, python3, libgpgme11, libyaml-0-2")
set(CPACK_DEBIAN_CTR_DESCRIPTION "HPC container runtime for Apptainer and Singularity images
ctr runs SIF, squashfs and directory images as an ordinary user, in a user
namespace, with no daemon: ctr exec image.sif ./app. It binds the host's GPU
driver (--nv, --rocm), MPI and fabric libraries, runs under mpirun and srun,
pulls from OCI registries and builds images. ctr-bench measures a container
against bare metal and gives a verdict per figure.

The programs are in /usr/lib/ctr/bin; /usr/bin/ctr is an alternative that
stays containerd's where containerd is installed.")

set(CPACK_DEBIAN_HELPER_PACKAGE_NAME ctr-suid)
set(CPACK_COMPONENT_HELPER_DEPENDS ctr)
set(CPACK_DEBIAN_HELPER_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_HELPER_PACKAGE_DEPENDS "adduser")  # its postinst makes the check's user
set(CPACK_DEBIAN_HELPER_DESCRIPTION "HPC container runtime - setuid helper for kernel squashfs
ctr-mount-helper lets ctr mount SIF and squashfs images with the kernel's
squashfs driver instead of FUSE, for images an administrator trusts. It does
nothing until /etc/ctr/ctr.conf says 'allow setuid = yes'; what it may mount
is set there too (setuid image directories, owners and formats).")

set(CPACK_DEBIAN_SLURM_PACKAGE_NAME ctr-slurm)
set(CPACK_COMPONENT_SLURM_DEPENDS ctr)
set(CPACK_DEBIAN_SLURM_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_SLURM_PACKAGE_RECOMMENDS "slurmd")
set(CPACK_DEBIAN_SLURM_DESCRIPTION "HPC container runtime - Slurm plugin
ctr_spank.so lets srun, sbatch and salloc run a job's steps in ctr containers:
srun --container-image=app.sif ./app, with pyxis's option names. One container
per node and step is started as the job's user and shared by its tasks, which
Slurm itself starts, so ranks, signals and exit codes are Slurm's. Enable it
with the line in /usr/share/ctr/slurm/plugstack.conf.")
set(ctr_deb_components ctr helper)
if(TARGET ctr_spank)
  list(APPEND ctr_deb_components slurm)
endif()
set(CPACK_CTR_DEB_COMPONENTS "${ctr_deb_components}")

# Maintainer scripts, conffiles and the changelog, with the install paths filled in.
set(ctr_deb "${CMAKE_BINARY_DIR}/deb")
configure_file("${CMAKE_CURRENT_LIST_DIR}/ctr.conffiles.in" "${ctr_deb}/ctr/conffiles" @ONLY)
configure_file("${CMAKE_CURRENT_LIST_DIR}/ctr.postinst.in" "${ctr_deb}/ctr/postinst" @ONLY)
configure_file("${CMAKE_CURRENT_LIST_DIR}/ctr.prerm.in" "${ctr_deb}/ctr/prerm" @ONLY)
configure_file("${CMAKE_CURRENT_LIST_DIR}/ctr-suid.postinst.in" "${ctr_deb}/ctr-suid/postinst" @ONLY)
configure_file("${CMAKE_CURRENT_LIST_DIR}/ctr-suid.postrm.in" "${ctr_deb}/ctr-suid/postrm" @ONLY)
configure_file("${CMAKE_CURRENT_LIST_DIR}/changelog.in" "${ctr_deb}/changelog" @ONLY)
set(CPACK_DEBIAN_CTR_PACKAGE_CONTROL_EXTRA "${ctr_deb}/ctr/conffiles;${ctr_deb}/ctr/postinst;${ctr_deb}/ctr/prerm")
set(CPACK_DEBIAN_HELPER_PACKAGE_CONTROL_EXTRA "${ctr_deb}/ctr-suid/postinst;${ctr_deb}/ctr-suid/postrm")

if(CTR_DEB_PACKAGE)
  # Each package's /usr/share/doc/PACKAGE: copyright and changelog.gz (a native package).
  set(ctr_deb_changelog "${ctr_deb}/changelog.gz")
  add_custom_command(OUTPUT "${ctr_deb_changelog}"
    COMMAND gzip -9nc "${ctr_deb}/changelog" > "${ctr_deb_changelog}"
    DEPENDS "${ctr_deb}/changelog" VERBATIM)
  add_custom_target(ctr_deb_changelog ALL DEPENDS "${ctr_deb_changelog}")
  install(FILES "${CMAKE_CURRENT_LIST_DIR}/copyright" "${ctr_deb_changelog}"
          DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/ctr" COMPONENT ctr)
  install(FILES "${CMAKE_CURRENT_LIST_DIR}/copyright" "${ctr_deb_changelog}"
          DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/ctr-suid" COMPONENT helper)
  if(TARGET ctr_spank)
    install(FILES "${CMAKE_CURRENT_LIST_DIR}/copyright" "${ctr_deb_changelog}"
            DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/ctr-slurm" COMPONENT slurm)
  endif()
  install(CODE "
    file(MAKE_DIRECTORY \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/bin\")
    file(CREATE_LINK ../${CMAKE_INSTALL_BINDIR}/ctr-bench \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/bin/ctr-bench\" SYMBOLIC)"
    COMPONENT ctr)
endif()
