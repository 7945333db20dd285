from checks import check, verdict

LIMITS = ("point-reads", "query-results", "transaction-records", "record-bytes", "transaction-bytes")


@check("limits.point-reads-boundary")
def test_point_reads_accepted_at_limit_rejected_past_it(driver, requirement_id):
    verdict(driver, requirement_id)


@check("limits.query-results-boundary")
def test_query_results_accepted_at_limit_rejected_past_it(driver, requirement_id):
    verdict(driver, requirement_id)


@check("limits.transaction-records-boundary")
def test_transaction_records_accepted_at_limit_rejected_past_it(driver, requirement_id):
    verdict(driver, requirement_id)


@check("limits.record-bytes-boundary")
def test_record_bytes_accepted_at_limit_rejected_past_it(driver, requirement_id):
    verdict(driver, requirement_id)


@check("limits.transaction-bytes-boundary")
def test_transaction_bytes_accepted_at_limit_rejected_past_it(driver, requirement_id):
    verdict(driver, requirement_id)
