/** The audit part of a record (docs/decisions/wire-format.md), for resources that name it createdAt/modifiedAt. */
export class AuditRecordDto {
  createdAt: string;
  /** Set on creation (equal to createdAt) and on every change. */
  modifiedAt: string | null;
  /** Id of the user whose token created the record. */
  createdBy: number | null;
  createdByUser: string | null;
  /** Id of the user whose token last changed the record. */
  modifiedBy: number | null;
  modifiedByUser: string | null;
}
