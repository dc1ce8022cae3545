# Read by cpack for each generator: the tarball is the relocatable tree without the setuid
# helper; the Debian packages are ctr, ctr-suid and (where the plugin was built) ctr-slurm.
if(CPACK_GENERATOR STREQUAL "DEB")
  set(CPACK_DEB_COMPONENT_INSTALL ON)
  set(CPACK_COMPONENTS_ALL ${CPACK_CTR_DEB_COMPONENTS})
  set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
  set(CPACK_COMPONENT_INCLUDE_TOPLEVEL_DIRECTORY OFF)
  set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
  set(CPACK_STRIP_FILES ON)
  # Each package's synopsis is the first line of its own description (deb.cmake), not the
  # project's one summary, which CPack would put before it.
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CPACK_DEFAULT_PACKAGE_DESCRIPTION_SUMMARY}")
endif()
