def test_a_reference_whose_d_was_read_as_zero_is_still_found() -> None:
    from raybatch.claude.emulator.rules import answer_chunk

    text = (
        "АКТ СДАЧИ-ПРИЁМКИ № АСТ-24-0140\nДата: 17.10.2024\nКонтрагент: ООО «Лесная Поляна»\n"
        "Основание: 0-2024-582\nСумма: 57 331,50 RUB\nАСТ-24-0140 . Стр. 1/1"
    )
    answer = answer_chunk([(1, text)])
    assert answer.documents[0].reference == "D-2024-582"
