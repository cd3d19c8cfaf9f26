package workqueue

// For the tests of package workqueue_test (which may import packages that
// import workqueue, such as foreman): the helpers of this package's tests.
var (
	StartMaster        = startMaster
	StartWorker        = startWorker
	StartCCToolsWorker = startCCToolsWorker
	Exercise           = exercise
	WaitAll            = waitAll
)
