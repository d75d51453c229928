#ifndef ACTIONHOOK_CLIBPQ_SHIM_H
#define ACTIONHOOK_CLIBPQ_SHIM_H

#include <postgresql/libpq-fe.h>

// Field codes for PQresultErrorField. They are character macros in postgres_ext.h, which Swift
// does not import.
static const int AH_PG_DIAG_SEVERITY = 'S';
static const int AH_PG_DIAG_SEVERITY_NONLOCALIZED = 'V';
static const int AH_PG_DIAG_SQLSTATE = 'C';
static const int AH_PG_DIAG_MESSAGE_PRIMARY = 'M';
static const int AH_PG_DIAG_MESSAGE_DETAIL = 'D';
static const int AH_PG_DIAG_CONSTRAINT_NAME = 'n';

#endif
