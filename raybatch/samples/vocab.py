"""Words the sample documents are written with: parties, titles, labels and body phrases, per language.

The printed conventions (what ``raybatch.claude.emulator.rules`` reads back) are fixed here:

- first page: a letterhead line, the title line ``<TITLE> No. <number>`` / ``<ЗАГОЛОВОК> № <number>``,
  then one ``Label: value`` line per field (date, counterparty, reference, amount);
- every page that is not blank ends with the footer ``<number> · Page k of n`` / ``<number> · Стр. k/n``,
  where n counts the document's pages, blank ones included;
- document numbers carry their type: ``INV-``, ``ACT-``, ``LTR-``, ``RCP-``; a contract's number is its
  deal reference ``D-yyyy-nnn``, which every document of the deal prints as its reference.
"""

from __future__ import annotations

from raybatch.claude.answer import DocType

LANGUAGES = ("en", "ru")

LETTERHEAD = {
    "en": "Harbor & Finch Trading Ltd · 14 Wharf Road, Bristol",
    "ru": "ООО «Рэйбатч Снаб» · г. Казань, ул. Баумана, 12",
}

COUNTERPARTIES = {
    "en": [
        "Northwind Logistics LLC",
        "Blue Harbor Foods Inc.",
        "Granite Peak Construction Ltd",
        "Silverline Software GmbH",
        "Oakridge Paper Mills Ltd",
        "Crescent Marine Supply Co.",
    ],
    "ru": [
        "ООО «Северный Ветер»",
        "АО «Уральские Станки»",
        "ООО «Лесная Поляна»",
        "ИП Соколова Марина Игоревна",
        "ООО «ТехноСфера»",
        "АО «Волжский Терминал»",
    ],
}

CURRENCIES = {"en": ("USD", "EUR"), "ru": ("RUB", "RUB", "USD")}

NUMBER_PREFIX = {DocType.INVOICE: "INV", DocType.ACT: "ACT", DocType.LETTER: "LTR", DocType.RECEIPT: "RCP"}

TITLES = {
    "en": {
        DocType.INVOICE: "INVOICE No. {number}",
        DocType.ACT: "ACCEPTANCE CERTIFICATE No. {number}",
        DocType.CONTRACT: "SUPPLY CONTRACT No. {number}",
        DocType.LETTER: "LETTER No. {number}",
        DocType.RECEIPT: "RECEIPT No. {number}",
    },
    "ru": {
        DocType.INVOICE: "СЧЁТ НА ОПЛАТУ № {number}",
        DocType.ACT: "АКТ СДАЧИ-ПРИЁМКИ № {number}",
        DocType.CONTRACT: "ДОГОВОР ПОСТАВКИ № {number}",
        DocType.LETTER: "ПИСЬМО № {number}",
        DocType.RECEIPT: "КВИТАНЦИЯ № {number}",
    },
}

LABELS = {
    "en": {"date": "Date", "counterparty": "Counterparty", "reference": "Reference", "amount": "Amount"},
    "ru": {"date": "Дата", "counterparty": "Контрагент", "reference": "Основание", "amount": "Сумма"},
}

FOOTER = {"en": "{number} · Page {k} of {n}", "ru": "{number} · Стр. {k}/{n}"}

ITEMS = {
    "en": [
        "Freight forwarding, Hamburg to Rotterdam",
        "Warehouse storage, pallet-month",
        "Customs brokerage",
        "Software licence, annual",
        "Technical support, hours",
        "Steel fittings, set of 50",
        "Packaging film, roll",
        "Site survey and report",
    ],
    "ru": [
        "Транспортно-экспедиционные услуги",
        "Хранение на складе, паллето-месяц",
        "Таможенное оформление",
        "Лицензия на программное обеспечение",
        "Техническая поддержка, час",
        "Комплект крепежа, 50 шт.",
        "Упаковочная плёнка, рулон",
        "Обследование объекта и отчёт",
    ],
}

CLAUSES = {
    "en": [
        "The Supplier shall deliver the goods in the quantities agreed in the specification.",
        "The Buyer shall pay each invoice within ten banking days of its receipt.",
        "Ownership of the goods passes to the Buyer upon signature of the acceptance certificate.",
        "Either party may terminate this contract with thirty days written notice.",
        "All disputes shall be settled by negotiation and, failing that, in the competent court.",
        "Prices are fixed for the whole term of this contract and include packaging.",
        "The parties shall keep the terms of this contract confidential.",
        "Force majeure releases the parties from liability for the duration of the event.",
        "Notices are valid when sent to the addresses stated in this contract.",
        "The goods shall be accompanied by quality certificates of the manufacturer.",
    ],
    "ru": [
        "Поставщик обязуется поставить товар в количестве, согласованном в спецификации.",
        "Покупатель оплачивает каждый счёт в течение десяти банковских дней с момента получения.",
        "Право собственности переходит к Покупателю после подписания акта сдачи-приёмки.",
        "Любая из сторон вправе расторгнуть договор, уведомив другую сторону за тридцать дней.",
        "Споры разрешаются путём переговоров, а при недостижении согласия в суде.",
        "Цены фиксированы на весь срок действия договора и включают стоимость упаковки.",
        "Стороны обязуются сохранять условия настоящего договора в тайне.",
        "Обстоятельства непреодолимой силы освобождают стороны от ответственности.",
        "Уведомления направляются по адресам, указанным в настоящем договоре.",
        "Товар сопровождается сертификатами качества производителя.",
    ],
}

NOTES = {
    "en": [
        "Payment terms: ten banking days from the date of this document.",
        "Bank: First Harbour Bank plc, account 4410 2208 3391, sort code 20-45-77.",
        "Please quote the document number with your payment.",
        "Goods remain our property until paid in full.",
        "Delivery: to the Buyer's warehouse, unloading at the Buyer's expense.",
        "Questions about this document: accounts@harborfinch.example",
        "Prices include packaging and exclude value added tax.",
        "Late payment interest is charged at 0.1 percent per day.",
    ],
    "ru": [
        "Срок оплаты: десять банковских дней с даты настоящего документа.",
        "Банк: АО «Первый Волжский банк», р/с 40702810400000012345, БИК 049205805.",
        "При оплате просим указывать номер документа.",
        "Товар остаётся нашей собственностью до полной оплаты.",
        "Доставка: до склада Покупателя, разгрузка за счёт Покупателя.",
        "Вопросы по документу: buh@raybatch-snab.example",
        "Цены указаны с учётом упаковки, без НДС.",
        "За просрочку оплаты начисляется пеня 0,1 процента в день.",
    ],
}

LETTER_LINES = {
    "en": [
        "Dear colleagues,",
        "we confirm receipt of your request and the documents attached to it.",
        "Please find below our comments on the schedule of deliveries for the next quarter.",
        "We kindly ask you to confirm the new delivery dates at your earliest convenience.",
        "Should you have any questions, our accounts team will be glad to help.",
        "We look forward to continuing our cooperation.",
        "Yours faithfully,",
    ],
    "ru": [
        "Уважаемые коллеги,",
        "подтверждаем получение вашего запроса и приложенных к нему документов.",
        "Направляем наши замечания к графику поставок на следующий квартал.",
        "Просим подтвердить новые сроки поставки в ближайшее время.",
        "По всем вопросам просим обращаться в нашу бухгалтерию.",
        "Рассчитываем на дальнейшее плодотворное сотрудничество.",
        "С уважением,",
    ],
}

# A letter mentions an invoice of its deal: a title-like phrase deep in a page that must not start a document.
LETTER_MENTION = {
    "en": "Regarding invoice No. {number}: the payment has been scheduled.",
    "ru": "По счёту № {number}: оплата запланирована.",
}

ACT_LINES = {
    "en": [
        "The services listed below were rendered in full and on time.",
        "The Customer has no claims regarding the scope, quality or timing of the services.",
        "This certificate is made in two copies, one for each party.",
    ],
    "ru": [
        "Перечисленные ниже услуги оказаны в полном объёме и в срок.",
        "Заказчик претензий по объёму, качеству и срокам оказания услуг не имеет.",
        "Акт составлен в двух экземплярах, по одному для каждой из сторон.",
    ],
}

RECEIPT_LINES = {
    "en": "Received from {counterparty} in payment under the deal {reference}.",
    "ru": "Принято от {counterparty} в оплату по сделке {reference}.",
}

SIGNATURES = {
    "en": ["For the Supplier: ______________", "For the Buyer: ______________"],
    "ru": ["От Поставщика: ______________", "От Покупателя: ______________"],
}

NOTES_HEADING = {"en": "Notes:", "ru": "Примечания:"}

SECTION = {"en": "Section {k}", "ru": "Раздел {k}"}
