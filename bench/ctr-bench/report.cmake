# `ctr-bench report` (report.cpp): a static library that ctr-bench links, its unit tests,
# and a small driver the integration test renders its fixture with.
# The result model (result.cpp) is here too: the report reads it, and ctr-bench-lib links this.
add_library(ctr-bench-report STATIC "${CMAKE_CURRENT_LIST_DIR}/report.cpp" "${CMAKE_CURRENT_LIST_DIR}/report_model.cpp"
  "${CMAKE_CURRENT_LIST_DIR}/report_plots.cpp" "${CMAKE_CURRENT_LIST_DIR}/result.cpp")
target_include_directories(ctr-bench-report PUBLIC "${CMAKE_CURRENT_LIST_DIR}")
target_link_libraries(ctr-bench-report PUBLIC ctr_common nlohmann_json::nlohmann_json)

if(CTR_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
  add_executable(ctr-bench-report-tests "${CMAKE_CURRENT_LIST_DIR}/tests/report_test.cpp")
  target_link_libraries(ctr-bench-report-tests PRIVATE ctr-bench-report GTest::gtest GTest::gtest_main)
  target_compile_options(ctr-bench-report-tests PRIVATE -O0)  # as tests/CMakeLists.txt says why
  target_compile_definitions(ctr-bench-report-tests PRIVATE
    CTR_BENCH_REPORT_FIXTURE="${CMAKE_CURRENT_LIST_DIR}/tests/report_fixture.json")
  gtest_discover_tests(ctr-bench-report-tests DISCOVERY_TIMEOUT 60
    PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")

  # tests/integration/test_ctr_bench_report.sh renders with it until ctr-bench has `report`.
  add_executable(ctr-bench-report-render "${CMAKE_CURRENT_LIST_DIR}/tests/report_render/main.cpp")
  target_link_libraries(ctr-bench-report-render PRIVATE ctr-bench-report)
endif()
