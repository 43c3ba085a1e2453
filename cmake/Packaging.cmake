# Installation layout and the Debian packages (CPack's DEB generator; tools/make-deb.sh builds them).
#
#   strata        /usr/bin/strata, /usr/bin/strata-train; /usr/lib/strata/libstrata_sentencepiece.so (opened with
#                 dlopen: data/SubwordTokenizer.cpp); /usr/share/strata/examples (and templates/ when the tree has
#                 one); the desktop entry, the hicolor icons, the .strata MIME type, AppStream metainfo, man pages.
#                 Its dependencies come from dpkg-shlibdeps over its binaries: nothing of CUDA's.
#   strata-cuda   /usr/lib/strata/libstrata_cuda.so, the CUDA backend the programs open when present
#                 (core/backend/CudaPlugin.h); it depends on NVIDIA's CUDA 13 runtime, cuBLAS and cuDNN 9.
#
# /usr/lib/strata is private: only the programs open what is there (never the linker), so no SONAME, no
# ldconfig and no -dev package.
set(STRATA_PRIVATE_LIBDIR lib/strata)
set(STRATA_DATADIR share/strata)
set(STRATA_APP_ID org.strata.Strata)
set(STRATA_PROJECT_LICENSE "LicenseRef-unpublished" CACHE STRING
    "SPDX expression of the project's license, for the AppStream metainfo (none is published yet)")
set(STRATA_SCREENSHOT_URL "file:///usr/share/strata/screenshots/main-window.png" CACHE STRING
    "URL of the AppStream screenshot; set an https URL once the project publishes docs/main-window.png")
set(STRATA_DEB_MAINTAINER "Strata developers <strata-dev@lists.strata-workbench.org>" CACHE STRING
    "Maintainer field of the .deb packages")

set(_plugin_permissions OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)  # shared objects: 0644, as Debian wants
install(TARGETS strata-train RUNTIME DESTINATION bin COMPONENT strata)
if(TARGET strata)
  install(TARGETS strata RUNTIME DESTINATION bin COMPONENT strata)
endif()
install(TARGETS strata_sentencepiece LIBRARY DESTINATION ${STRATA_PRIVATE_LIBDIR} COMPONENT strata
        PERMISSIONS ${_plugin_permissions})
if(TARGET strata_cuda)
  install(TARGETS strata_cuda LIBRARY DESTINATION ${STRATA_PRIVATE_LIBDIR} COMPONENT cuda
          PERMISSIONS ${_plugin_permissions})
endif()

# Examples and templates by folder, so that new ones are packaged without a change here; what the tools and the
# programs write into examples/ (.gitignore: run folders, rendered image folders, caches, made data sets) is not.
set(_strata_generated PATTERN "runs" EXCLUDE PATTERN ".strata-cache" EXCLUDE PATTERN "fashion_png" EXCLUDE
    REGEX "/fashion_jpg[^/]*$" EXCLUDE PATTERN "debian_sections" EXCLUDE PATTERN "*.swp" EXCLUDE
    PATTERN "__pycache__" EXCLUDE)
foreach(folder examples templates)
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/${folder})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/ DESTINATION ${STRATA_DATADIR}/${folder} COMPONENT strata
            FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ ${_strata_generated})
  endif()
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/docs/main-window.png DESTINATION ${STRATA_DATADIR}/screenshots COMPONENT strata)

# Desktop integration: the entry (double-click on a .strata file opens the workbench), the MIME type, the icons.
set(_desktop ${PROJECT_SOURCE_DIR}/resources/desktop)
install(FILES ${_desktop}/${STRATA_APP_ID}.desktop DESTINATION share/applications COMPONENT strata)
install(FILES ${_desktop}/strata-mime.xml DESTINATION share/mime/packages RENAME strata.xml COMPONENT strata)
string(TIMESTAMP STRATA_RELEASE_DATE "%Y-%m-%d" UTC)
execute_process(COMMAND git -C "${PROJECT_SOURCE_DIR}" log -1 --format=%cs OUTPUT_VARIABLE _date
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
if(_rc EQUAL 0 AND NOT _date STREQUAL "")
  set(STRATA_RELEASE_DATE "${_date}")  # the commit's date: the same package from the same commit
endif()
configure_file(${_desktop}/${STRATA_APP_ID}.metainfo.xml.in ${CMAKE_BINARY_DIR}/packaging/${STRATA_APP_ID}.metainfo.xml
               @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/${STRATA_APP_ID}.metainfo.xml DESTINATION share/metainfo
        COMPONENT strata)
set(_icon ${PROJECT_SOURCE_DIR}/resources/icons/strata.svg)
install(FILES ${_icon} DESTINATION share/icons/hicolor/scalable/apps RENAME ${STRATA_APP_ID}.svg COMPONENT strata)
install(FILES ${_icon} DESTINATION share/icons/hicolor/scalable/mimetypes RENAME application-x-strata-project.svg
        COMPONENT strata)

# Build-time outputs: PNG icons rendered from the SVG, man pages from the programs' --help, the Debian changelog.
# Part of `all` when their tools are there; tools/make-deb.sh requires the tools.
find_program(RSVG_CONVERT rsvg-convert)
find_program(HELP2MAN help2man)
find_program(GZIP gzip REQUIRED)
set(_pkg ${CMAKE_BINARY_DIR}/packaging)
set(_outputs "")
if(RSVG_CONVERT)
  foreach(size 16 24 32 48 64 128 256 512)
    set(png ${_pkg}/icons/${size}x${size}/${STRATA_APP_ID}.png)
    add_custom_command(OUTPUT ${png} COMMAND ${CMAKE_COMMAND} -E make_directory ${_pkg}/icons/${size}x${size}
                       COMMAND ${RSVG_CONVERT} -w ${size} -h ${size} -o ${png} ${_icon} DEPENDS ${_icon} VERBATIM)
    list(APPEND _outputs ${png})
    install(FILES ${png} DESTINATION share/icons/hicolor/${size}x${size}/apps COMPONENT strata)
  endforeach()
else()
  message(STATUS "Packaging: no rsvg-convert (librsvg2-bin): the PNG icons are not made, `cmake --install` fails")
endif()
if(HELP2MAN)
  set(_man_strata_train ${_pkg}/man/strata-train.1)
  add_custom_command(OUTPUT ${_man_strata_train} ${_man_strata_train}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_pkg}/man
    COMMAND ${CMAKE_COMMAND} -DHELP2MAN=${HELP2MAN} -DPROGRAM=$<TARGET_FILE:strata-train> -DOUTPUT=${_man_strata_train}
            "-DNAME=train, export and query Strata neural-network projects headless" -DVERSION=${PROJECT_VERSION}
            "-DSEE_ALSO=.BR strata (1)" -P ${PROJECT_SOURCE_DIR}/cmake/ManPage.cmake
    COMMAND ${GZIP} -9nf -k ${_man_strata_train}
    DEPENDS strata-train ${PROJECT_SOURCE_DIR}/cmake/ManPage.cmake VERBATIM)
  list(APPEND _outputs ${_man_strata_train}.gz)
  install(FILES ${_man_strata_train}.gz DESTINATION share/man/man1 COMPONENT strata)
  if(TARGET strata)
    set(_man_strata ${_pkg}/man/strata.1)
    add_custom_command(OUTPUT ${_man_strata} ${_man_strata}.gz
      COMMAND ${CMAKE_COMMAND} -E make_directory ${_pkg}/man
      COMMAND ${CMAKE_COMMAND} -DHELP2MAN=${HELP2MAN} -DPROGRAM=$<TARGET_FILE:strata> -DOUTPUT=${_man_strata}
              "-DNAME=the Strata workbench: draw, train and export neural networks" -DVERSION=${PROJECT_VERSION}
              "-DSEE_ALSO=.BR strata-train (1)" -DOFFSCREEN=ON -P ${PROJECT_SOURCE_DIR}/cmake/ManPage.cmake
      COMMAND ${GZIP} -9nf -k ${_man_strata}
      DEPENDS strata ${PROJECT_SOURCE_DIR}/cmake/ManPage.cmake VERBATIM)
    list(APPEND _outputs ${_man_strata}.gz)
    install(FILES ${_man_strata}.gz DESTINATION share/man/man1 COMPONENT strata)
  endif()
else()
  message(STATUS "Packaging: no help2man: the man pages are not made, `cmake --install` fails")
endif()

# /usr/share/doc/<package>/: copyright and a Debian changelog (native package: changelog.gz) naming the commit.
execute_process(COMMAND git -C "${PROJECT_SOURCE_DIR}" log -1 "--format=%h%n%aD" OUTPUT_VARIABLE _commit
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
if(_rc EQUAL 0 AND NOT _commit STREQUAL "")
  string(REPLACE "\n" ";" _commit "${_commit}")
  list(GET _commit 0 _hash)
  list(GET _commit 1 _when)
else()
  set(_hash "unknown")
  string(TIMESTAMP _when "%a, %d %b %Y %H:%M:%S +0000" UTC)
endif()
file(WRITE ${_pkg}/changelog "strata (${PROJECT_VERSION}) unstable; urgency=medium\n\n"
     "  * Built from commit ${_hash}; the project's git history is its changelog.\n\n"
     " -- ${STRATA_DEB_MAINTAINER}  ${_when}\n")
add_custom_command(OUTPUT ${_pkg}/changelog.gz COMMAND ${GZIP} -9nf -k ${_pkg}/changelog
                   DEPENDS ${_pkg}/changelog VERBATIM)
list(APPEND _outputs ${_pkg}/changelog.gz)
foreach(component strata cuda)
  set(package strata)
  if(component STREQUAL "cuda")
    set(package strata-cuda)
  endif()
  install(FILES ${_pkg}/changelog.gz ${PROJECT_SOURCE_DIR}/resources/debian/copyright
          DESTINATION share/doc/${package} COMPONENT ${component})
endforeach()
add_custom_target(strata_packaging_files ALL DEPENDS ${_outputs})

# ---- CPack: the .deb packages ----------------------------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME strata)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${STRATA_DEB_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL strata)
if(TARGET strata_cuda)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # strata_0.1.0_amd64.deb, strata-cuda_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${STRATA_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Dependencies from dpkg-shlibdeps over each package's binaries, not by hand.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# /usr/lib/strata and the CUDA toolkit's libraries (not from a Debian package here: NVIDIA's), for
# dpkg-shlibdeps to find the libraries the plugin needs.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/bin)
if(TARGET strata_cuda)
  list(APPEND CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_TARGET_DIR}/lib
       /usr/local/cuda/lib64)
endif()

set(CPACK_DEBIAN_STRATA_PACKAGE_NAME strata)
set(CPACK_DEBIAN_STRATA_FILE_NAME DEB-DEFAULT)
set(CPACK_COMPONENT_STRATA_DISPLAY_NAME "Strata")
set(CPACK_COMPONENT_STRATA_DESCRIPTION "workbench for training neural networks
Strata is a desktop workbench for training neural networks: draw a network as
a graph of layers, train it on the CPU while live charts show loss, accuracy,
learning rate, throughput and memory, and export it to ONNX, GGUF or
safetensors. strata-train runs the same engine headless, also across machines
with MPI.

This package trains on the CPU (oneDNN, OpenBLAS). Install strata-cuda for
NVIDIA GPUs. The examples are in /usr/share/strata/examples; those of
Fashion-MNIST need the dataset-fashion-mnist package.")
# The Fashion-MNIST examples read Debian's dataset-fashion-mnist; the GPU backend is its own package.
set(CPACK_DEBIAN_STRATA_PACKAGE_SUGGESTS "dataset-fashion-mnist, strata-cuda")

set(CPACK_DEBIAN_CUDA_PACKAGE_NAME strata-cuda)
set(CPACK_DEBIAN_CUDA_FILE_NAME DEB-DEFAULT)
set(CPACK_COMPONENT_CUDA_DISPLAY_NAME "Strata CUDA backend")
set(CPACK_COMPONENT_CUDA_DESCRIPTION "CUDA backend of the Strata neural-network workbench
The CUDA backend of Strata (cuBLAS, cuDNN and Strata's own kernels) as a
plugin that strata and strata-train load when it is installed: training on
NVIDIA GPUs, and across GPUs with NCCL (libnccl2, opened when a multi-GPU run
starts).

It needs NVIDIA's CUDA 13 runtime, cuBLAS and cuDNN 9 packages (NVIDIA's
Debian 12 repository) and an NVIDIA driver.")
set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS ON)
# NVIDIA's libraries are not in Debian, so dpkg-shlibdeps finds no package for them (it skips them with
# --ignore-missing-info): their packages are named here, with the very strata build the plugin binds to.
set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS
    "strata (= ${PROJECT_VERSION}), cuda-cudart-13-0, libcublas-13-0, libcudnn9-cuda-13")
set(CPACK_DEBIAN_CUDA_PACKAGE_RECOMMENDS "libnccl2")

include(CPack)
