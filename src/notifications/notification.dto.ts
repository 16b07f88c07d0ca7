/** A notification as the API returns it. */
export class NotificationRecordDto {
  id: number;
  message: string;
  /** lead_assigned, report_ready or sms_failed. */
  type: string;
  isRead: boolean;
  createdAt: string;
  /** When it was last changed (marked read), or null. */
  modifiedAt: string | null;
  /** The user the notification is for (always the caller). */
  userId: number;
  userName: string;
  /** Depends on type: lead_assigned has leadId and leadName; report_ready has reportId; sms_failed has textMessageId. */
  details: Record<string, unknown>;
}

/** Answer of POST /api/notifications/read-all. */
export class ReadAllResultDto {
  success: boolean;
  /** How many of the caller's notifications were unread and are now read. */
  updated: number;
}
