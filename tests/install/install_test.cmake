# Driven by ctest: install, build a consumer against the install, run it and the installed CLI.
file(REMOVE_RECURSE ${SCRATCH})
set(prefix ${SCRATCH}/prefix)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install ${BINARY} --prefix ${prefix})
run(${CMAKE_COMMAND} -S ${SOURCE}/tests/install/consumer -B ${SCRATCH}/consumer
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX})
run(${CMAKE_COMMAND} --build ${SCRATCH}/consumer)
# The source tree's profiles must not be what the consumer reads: point away from them.
run(${CMAKE_COMMAND} -E env PIPEWRIGHT_PROFILE_DIR=${prefix}/share/pipewright/profiles
    ${SCRATCH}/consumer/consumer)
if(NOT last_out MATCHES "profile dgx-a100-80gb")
  message(FATAL_ERROR "consumer printed: ${last_out}")
endif()
# The installed CLI finds the installed default scenario (run from a directory without one).
file(MAKE_DIRECTORY ${SCRATCH}/elsewhere)
execute_process(COMMAND ${prefix}/bin/pipewright plan --des-top 0 --top 1
                WORKING_DIRECTORY ${SCRATCH}/elsewhere RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "share/pipewright/scenarios/gpt3-175b-1024-a100.yaml|gpt3-175b")
  message(FATAL_ERROR "installed plan failed (${rc}): ${out}${err}")
endif()
file(REMOVE_RECURSE ${SCRATCH})
