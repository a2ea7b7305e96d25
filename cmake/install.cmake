# What `cmake --install` puts under the prefix, and the .deb cpack makes of it:
#   bin/softrdma                       the tool (finds the rest in ../lib/softrdma)
#   lib/softrdma/libsoftrdma-rdmavN.so the provider, for the libibverbs built against
#   lib/softrdma/libsoftrdma-preload.so, softrdma-sysfs, softrdma-cm-demo, free_port.sh
#   lib/softrdma/rdmacm/librdmacm.so.1 the drop-in librdmacm (LD_LIBRARY_PATH under run/env)
#   share/man/man1/softrdma.1, man7/softrdma.7, man7/softrdma-faults.7
install(PROGRAMS ${CMAKE_BINARY_DIR}/bin/softrdma DESTINATION bin)
install(TARGETS softrdma softrdma-preload LIBRARY DESTINATION lib/softrdma)
install(TARGETS softrdma-sysfs RUNTIME DESTINATION lib/softrdma)
install(TARGETS rdmacm-shim LIBRARY DESTINATION lib/softrdma/rdmacm NAMELINK_SKIP)

# Man pages, gzipped as Debian installs them (gzip -n: no name or time stamp, reproducible).
set(SOFTRDMA_MAN_PAGES softrdma.1 softrdma.7 softrdma-faults.7)
set(man_gz)
foreach(page ${SOFTRDMA_MAN_PAGES})
  set(gz ${CMAKE_BINARY_DIR}/man/${page}.gz)
  add_custom_command(OUTPUT ${gz}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND gzip -9n -c ${CMAKE_SOURCE_DIR}/docs/${page} > ${gz}
    DEPENDS ${CMAKE_SOURCE_DIR}/docs/${page} VERBATIM)
  list(APPEND man_gz ${gz})
  string(REGEX MATCH "[0-9]$" section ${page})
  install(FILES ${gz} DESTINATION share/man/man${section})
endforeach()
add_custom_target(man-pages ALL DEPENDS ${man_gz})

# The .deb: `cmake --build build --target package` (docs/ci.md). It depends on the
# libibverbs it was built for: the provider registers only with the releases from the one
# built against to the last with the same private layouts (cmake/rdma_core_version.cmake).
math(EXPR past_last "${SOFTRDMA_PABI_MAX} + 1")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME softrdma)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "user-space soft-RDMA device for unmodified verbs programs")
set(CPACK_PACKAGE_DESCRIPTION "softrdma gives unmodified libibverbs and librdmacm programs \
an RDMA device, softrdma0, on any Linux machine: no RDMA NIC, no kernel module, no root. \
softrdma run starts a program with the device visible; softrdma env sets up a shell or a CI \
job. Built for rdma-core ${SOFTRDMA_PABI_MIN} to ${SOFTRDMA_PABI_MAX}.")
if(NOT CPACK_PACKAGE_CONTACT)
  set(CPACK_PACKAGE_CONTACT "softrdma maintainers <maintainers@softrdma.invalid>")
endif()
set(CPACK_DEBIAN_PACKAGE_RELEASE "1+rdma${RDMA_CORE_VERSION}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "bash, libibverbs1 (>= ${SOFTRDMA_PABI_MIN}), libibverbs1 (<< ${past_last})")
# ibv_devinfo and the pingpongs, rping and friends, perftest: what `softrdma demo` runs.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-utils, rdmacm-utils, perftest, iproute2")
# softrdma pcap-merge runs mergecap; tshark and Wireshark read the captures.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "tshark, wireshark-common")
# The libraries' own dependencies (libc, liburing, libibverbs), from dpkg-shlibdeps (which
# cpack runs through `file`); only when what we linked is the system's (a prefix's
# rdma-core belongs to no package).
if(IBVERBS_LIBDIR MATCHES "^/usr/lib")
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
include(CPack)

# The pages lint-clean, installed where man finds them (tests/integration/test_man_pages.sh).
add_test(NAME test_man_pages
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/integration/test_man_pages.sh)
set_tests_properties(test_man_pages PROPERTIES
  ENVIRONMENT "SOFTRDMA_BUILD=${CMAKE_BINARY_DIR};SOFTRDMA_SOURCE=${CMAKE_SOURCE_DIR}")
